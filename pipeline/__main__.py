from pipeline.entry import main

main()
