from hspz.cli import entry

entry()
