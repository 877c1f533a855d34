"""mlemu's command line: the management client, batch jobs, and serve's supervisor."""
