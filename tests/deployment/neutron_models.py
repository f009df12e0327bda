"""Preloaded by the test's neutron-api: every model mapped up front.

neutron's port listing names a relation of ``Port`` that exists only
once SQLAlchemy has configured every mapper, which happens at the first
query; under uWSGI an earlier request or worker has made one, here the
first request would be Nova's port listing, and it would fail.
"""

from neutron.db.migration.models import head  # noqa: F401
from sqlalchemy import orm

orm.configure_mappers()
