from ladder.cli import entry

entry()
