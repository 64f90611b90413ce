from devicerl.cli.main import main

raise SystemExit(main())
