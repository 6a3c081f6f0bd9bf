"""The commands of the `pipesat` command line (`cli.py` registers them) and what they share: the error
frame, the option sets, the checks before any work, what they print and the progress line."""
