from gpuplan.interfaces.cli import main

main()
