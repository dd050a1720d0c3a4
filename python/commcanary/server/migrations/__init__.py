"""The schema's versioned migrations (Alembic): ``versions/`` holds one
module per revision, applied in order at the server's start
(:func:`commcanary.server.database.migrate`)."""
