"""The journal on disk: the writer (numbered, masked, durable by need), the reader, run directories and their
locks, the listing of runs, and how many notifications reach the file."""
