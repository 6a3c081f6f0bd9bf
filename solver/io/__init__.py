"""Files: schedule files (JSON), the one atomic writer, and exports such as the Chrome trace."""
