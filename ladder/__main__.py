from ladder.cli import main

main()
