from charter.cli.main import main

main()
