"""Configuration options of the Cinder SPDK vhost driver.

They live in the backend's section of cinder.conf, next to the SPDK
JSON-RPC options of :mod:`spdk_vhost_core.options` (how to reach the
target), which the driver registers in the same section.
"""

from oslo_config import cfg

driver_opts = [
    cfg.ListOpt('spdk_lvstores',
                default=['lvs0'],
                help='Names of the SPDK lvol stores this backend carves '
                     'volumes from; each one is reported as a pool.'),
    cfg.BoolOpt('spdk_thin_provision',
                default=True,
                help='Create thin-provisioned lvols: space is allocated '
                     'on first write, so clones and snapshots stay cheap.'),
    cfg.StrOpt('spdk_lvol_clear_method',
               choices=['none', 'unmap', 'write_zeroes'],
               help='How SPDK clears an lvol\'s clusters when it is '
                    'deleted or shrunk (bdev_lvol_create clear_method). '
                    'Unset lets SPDK choose (unmap).'),
    cfg.StrOpt('spdk_target_id',
               help='Identity of the SPDK target this backend drives. A '
                    'connector reporting the same spdk_target_id shares '
                    'the target (hyperconverged) and gets the lvol '
                    'directly (transport local) instead of NVMe-oF. '
                    'Unset: this host\'s name when the RPC goes to a Unix '
                    'socket, tcp:<address>:<port> otherwise.'),
    cfg.ListOpt('spdk_replica_targets',
                default=[],
                help='Names of cinder.conf sections, each describing '
                     'another SPDK storage target with the options of a '
                     'backend section (spdk_rpc_socket or spdk_rpc_address, '
                     'spdk_target_id, spdk_lvstores, spdk_nvmf_address, '
                     'spdk_nvmf_port, spdk_saved_config); the sections are '
                     'not enabled backends. A volume type with the extra '
                     'spec spdk:replicas = 2 or 3 keeps that many copies of '
                     'each volume: one on this backend\'s target, the others '
                     'on these, each on a different one. Each target is a '
                     'failure domain: list only targets on other hosts, '
                     'and run them without bdev auto-examine. Take out a '
                     'target gone for good: its copies are made anew '
                     'elsewhere at each volume\'s next attach.'),
    cfg.StrOpt('spdk_nvmf_transport',
               default='tcp',
               choices=[('tcp', 'NVMe/TCP.'),
                        ('rdma', 'NVMe/RDMA.'),
                        ('none', 'No NVMe-oF: only compute hosts on this '
                                 'SPDK target (transport local) attach '
                                 'volumes, and the target may be an SPDK '
                                 'vhost application, which has no nvmf_* '
                                 'RPCs. Images cannot be written into '
                                 'volumes, nor QoS limits changed on '
                                 'volumes no guest has open.')],
               help='NVMe-oF transport used to export volumes to compute '
                    'hosts that run their own SPDK target.'),
    cfg.HostAddressOpt('spdk_nvmf_address',
                       default='127.0.0.1',
                       help='Address the per-volume NVMe-oF subsystems '
                            'listen on; compute hosts connect to it.'),
    cfg.PortOpt('spdk_nvmf_port',
                default=4420,
                help='Port (trsvcid) of the NVMe-oF listener.'),
    cfg.StrOpt('spdk_nvmf_nqn_prefix',
               default='nqn.2016-06.io.spdk:cinder',
               help='Prefix of the per-volume subsystem NQNs; the volume '
                    'name is appended after a colon.'),
    cfg.StrOpt('spdk_nvmf_auth',
               default='none',
               choices=[('none', 'Hosts are admitted by host NQN only.'),
                        ('dhchap', 'Each attachment also gets a fresh '
                                   'DH-HMAC-CHAP secret that the compute '
                                   'host must prove it holds.')],
               help='Authentication of compute hosts on the per-volume '
                    'NVMe-oF subsystems. The secret travels to the '
                    'compute host in the connection info, which Cinder '
                    'stores unencrypted in its database.'),
    cfg.StrOpt('spdk_nvmf_key_dir',
               help='Directory, on the SPDK target\'s host and readable '
                    'by the SPDK process, where the DH-HMAC-CHAP key '
                    'files (mode 0600) that SPDK\'s keyring reads are '
                    'written. Required with spdk_nvmf_auth=dhchap.'),
    cfg.StrOpt('spdk_image_staging_dir',
               help='Directory for the raw files that carry images into '
                    'and out of lvols (bdev_aio_create opens them), so it '
                    'must be on the SPDK target\'s host and readable and '
                    'writable by the SPDK process. Unset: Cinder\'s '
                    'image_conversion_dir.'),
    cfg.StrOpt('spdk_dd_path',
               default='spdk_dd',
               help='SPDK\'s spdk_dd program (a path, or a name on PATH), '
                    'run on the storage node to write images into lvols '
                    'over a scratch NVMe-oF export on spdk_nvmf_address.'),
    cfg.StrOpt('spdk_dd_core_mask',
               default='0x1',
               help='Core mask (-m) of spdk_dd. It runs with the core locks '
                    'off, so it may share cores with the SPDK target.'),
    cfg.IntOpt('spdk_dd_mem_mb',
               default=0,
               min=0,
               help='Hugepage memory (-s, MiB) spdk_dd reserves; 0: SPDK\'s '
                    'default.'),
    cfg.IntOpt('spdk_sweep_interval',
               default=600,
               min=0,
               help='Seconds between two sweeps of what interrupted copies '
                    'left on the targets (scratch lvols and NVMe-oF '
                    'exports), besides the sweep at start: in a cluster, '
                    'a member that died mid-copy leaves them to the '
                    'others. 0: at start only.'),
    cfg.IntOpt('spdk_image_copy_timeout',
               default=3600,
               min=1,
               help='Seconds to wait for one SPDK shallow copy before '
                    'giving up: of a volume to an image file, or of one '
                    'lvol (the volume or a snapshot it reads) when a '
                    'volume moves to another lvol store.'),
    cfg.BoolOpt('spdk_image_cache_enabled',
                default=False,
                help='Make volumes from an image as thin clones of one '
                     'read-only base lvol per image and lvol store, so '
                     'every volume after the first is a metadata '
                     'operation. A base is deleted with its last clone.'),
    cfg.IntOpt('spdk_image_cache_max_count',
               default=50,
               min=0,
               help='Most image base lvols per lvol store (0: no limit). '
                    'When full, volumes are made from a full image copy '
                    'instead.'),
    cfg.IntOpt('spdk_image_cache_max_size_gb',
               default=0,
               min=0,
               help='Most GiB the image base lvols of one lvol store may '
                    'hold together (0: no limit). When full, volumes are '
                    'made from a full image copy instead.'),
]
