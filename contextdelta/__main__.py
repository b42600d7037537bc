from contextdelta.cli import main

main()
