"""One item's tool call: its arguments, the check against the server's tools, its attempts (the retry rule), a
call the server takes as a task, and the link to the server the calls go through (``servers``)."""
