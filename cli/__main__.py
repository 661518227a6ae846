"""``python -m flinkstate.cli``."""

from flinkstate.cli.app import main

main()
