"""Base test class shared by every test in this repository."""

import fixtures
from oslo_concurrency import lockutils
from oslotest import base


class TestCase(base.BaseTestCase):
    """oslotest's base (timeout, log and output capture) plus a lock path.

    oslo.concurrency external locks need a lock path; each test gets its own
    directory so no test ever contends on a lock another test left behind.
    """

    def setUp(self):
        super().setUp()
        lockutils.set_defaults(self.useFixture(fixtures.TempDir()).path)
