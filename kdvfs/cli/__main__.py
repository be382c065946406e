from kdvfs.cli import main

raise SystemExit(main())
