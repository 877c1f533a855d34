"""Wire protocols: one Flask blueprint per serving protocol, all calling dataplane.predict."""
