"""One module per hspZ command (`run`, `plan`, `work`, `merge`, ...): each takes the parsed
request and does the command; cli.py parses and calls."""
