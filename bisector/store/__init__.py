"""The verdict store: SQLAlchemy models, migrations, and the queries the service needs."""
