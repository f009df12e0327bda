"""The os-brick connector that attaches SPDK volumes as vhost-user-blk."""
