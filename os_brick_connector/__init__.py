"""SPDK JSON-RPC client and the os-brick connector for vhost-user-blk."""
