from tokenmill.entry import main

main()
