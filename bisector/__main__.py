from bisector.cli import main

main()
