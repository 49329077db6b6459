from detection.run import main

raise SystemExit(main())
