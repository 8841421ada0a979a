import sys

from dpcount.cli import main

sys.exit(main())
