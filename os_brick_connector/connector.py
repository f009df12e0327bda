"""os-brick connector that turns an SPDK volume into a vhost-user socket.

os-brick's connector table is fixed, so nothing finds this class by its
protocol name: the Nova driver (``nova_vhost_user``) builds it directly.
"""

import functools
import grp
import os
import pwd
import stat
import time

from os_brick import exception as brick_exception
from os_brick.initiator.connectors import base
from oslo_config import cfg
from oslo_log import log
from oslo_utils import excutils

from os_brick_connector import backing
from os_brick_connector import conf_check
from os_brick_connector import connector_errors as errors
from os_brick_connector import controller_saver
from os_brick_connector import frontend_qos
from os_brick_connector import host_identity
from os_brick_connector import host_lock
from os_brick_connector import numa
from os_brick_connector import options
from os_brick_connector import privileged
from os_brick_connector import trace
from spdk_vhost_core import exception as spdk_exc
from spdk_vhost_core import properties
from spdk_vhost_core import saved_config
from spdk_vhost_core import spdk_rpc
from spdk_vhost_core import validation

LOG = log.getLogger(__name__)

PROTOCOL = 'SPDK_VHOST'
DEVICE_TYPE = 'vhost_user_blk'
#: One connector call at a time on this host (see host_lock).
synchronized = host_lock.synchronized


def default_conf():
    """``CONF.spdk_vhost`` with the connector's options registered."""
    options.register_opts(cfg.CONF)
    return cfg.CONF.spdk_vhost


def target_errors(func):
    """Only os-brick exceptions leave: a core error is translated.

    The core's error (an :class:`exception.SpdkRpcError` with the method,
    its masked parameters and SPDK's code and message) is the cause.
    """
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        try:
            return func(self, *args, **kwargs)
        except spdk_exc.SpdkVhostError as err:
            raise errors.from_core(err, self.client.target,
                                   func.__name__) from err
    return wrapper


class SpdkVhostConnector(base.BaseLinuxConnector):
    """Attach SPDK volumes to guests as vhost-user-blk sockets.

    ``connection_properties`` is Cinder's ``connection_info['data']``
    plus what Nova adds, parsed once into
    :class:`properties.ConnectionProperties` (the wire format). The
    controller is polled by one SPDK reactor on the guest's NUMA node,
    the one serving the fewest controllers; ``[spdk_vhost] numa_policy``
    says what happens when the node has no reactor. A multiattach
    volume's guests each get a controller of their own on the volume's
    one bdev; disconnect needs the same ``attached_to``.

    ``connect_volume`` returns ``{'type': 'vhost_user_blk', 'path':
    <socket>, 'controller': <name>, 'cpumask': <hex>, 'numa_node': <node
    of the chosen reactor or None>}``. The controller is named from the
    volume id (and ``attached_to``), so a retry finds it. The bdev under
    it (the volume-named layer, or the NVMe-oF namespace) is shared by a
    volume's controllers and goes with the last of them.

    Exceptions, all :class:`os_brick.exception.BrickException`:
    malformed properties raise ``InvalidConnectionProperties`` before any
    RPC (see :mod:`validation`); unusable ``[spdk_vhost]`` options raise
    ``InvalidConnectorConfig`` at construction; refusals raise the other
    classes of :mod:`connector_errors`; a failure of the target itself
    is ``TargetError`` (its cause the :class:`exception.SpdkRpcError`),
    with whatever the call created undone. Public methods are decorated
    trace, then synchronized, then :func:`target_errors`.
    """

    def __init__(self, root_helper, driver=None, execute=None,
                 conf=None, client=None, *args, **kwargs):
        super().__init__(root_helper, driver=driver, execute=execute,
                         *args, **kwargs)
        self.conf = conf if conf is not None else default_conf()
        conf_check.check_conf(self.conf)
        if self.conf.spdk_rpc_address is None:
            validation.warn_if_world_writable(self.conf.spdk_rpc_socket)
        self.client = (client if client is not None
                       else spdk_rpc.SpdkClient.from_conf(self.conf))
        self.backing = backing.Backing(self.client, self.conf)
        self.saved = controller_saver.ControllerSaver(
            saved_config.ConfigSaver.from_conf(self.client, self.conf))

    @staticmethod
    def get_connector_properties(root_helper, *args, **kwargs):
        """This host's SPDK identity for Cinder; see host_identity.

        ``conf`` and ``client`` may be passed as keyword arguments
        (tests, or a caller holding its own); else ``CONF.spdk_vhost``.
        """
        conf = kwargs.get('conf') or default_conf()
        client = kwargs.get('client')
        if client is not None:
            return host_identity.connector_properties(conf, client)
        with spdk_rpc.SpdkClient.from_conf(conf) as own:
            return host_identity.connector_properties(conf, own)

    # -- lookups -----------------------------------------------------------

    def _device_info(self, ctrl, topology):
        cores = numa.cpumask_cores(ctrl['cpumask'])
        nodes = {topology.node_of(core) for core in cores}
        return {'type': DEVICE_TYPE, 'path': ctrl['socket'],
                'controller': ctrl['ctrlr'], 'cpumask': ctrl['cpumask'],
                'numa_node': nodes.pop() if len(nodes) == 1 else None}

    # -- connect -----------------------------------------------------------

    def _create_controller(self, name, bdev, props, undo, topology):
        """Create the controller on the least loaded reactor of the node.

        Returns its saved-config entries (see :mod:`controller_saver`).
        """
        load = topology.load(properties.CONTROLLER_PREFIX)
        core = numa.choose_core(topology, load, props.numa_node,
                                self.conf.numa_policy)
        try:
            self.client.vhost_create_blk_controller(
                name, bdev, cpumask=numa.core_mask(core),
                readonly=props.read_only or None,
                packed_ring=self.conf.vhost_packed_ring or None)
            undo.append(lambda: self._delete_controller(name, force=True))
        except spdk_exc.SpdkTransportError:
            # Its answer was lost, so it may exist: undo it all the same.
            undo.append(lambda: self._delete_controller(name, force=True))
            raise
        except spdk_exc.AlreadyExists:
            LOG.info('vhost-blk controller %s appeared meanwhile; reusing',
                     name)
            return self._entries(self.client.vhost_controller(name), bdev,
                                 props)
        coalescing = self._coalescing()
        if coalescing:
            self.client.vhost_controller_set_coalescing(name, *coalescing)
        return controller_saver.controller_entries(
            name, bdev, core, props.read_only, coalescing)

    def _coalescing(self):
        if self.conf.vhost_coalescing_delay_base_us:
            return (self.conf.vhost_coalescing_delay_base_us,
                    self.conf.vhost_coalescing_iops_threshold)
        return None

    def _entries(self, ctrl, bdev, props):
        """The saved-config entries of an existing controller we reuse."""
        self._check_reusable(ctrl, bdev, props)
        core = min(numa.cpumask_cores(ctrl['cpumask']))
        return controller_saver.controller_entries(
            ctrl['ctrlr'], bdev, core, props.read_only, self._coalescing())

    def _check_reusable(self, ctrl, bdev, props):
        found = backing.controller_bdev(ctrl)
        if found != bdev:
            raise errors.ControllerConflict(ctrlr=ctrl['ctrlr'],
                                            found=found, wanted=bdev)
        readonly = ctrl['backend_specific']['block'].get('readonly', False)
        if readonly != props.read_only:
            raise errors.ControllerConflict(
                ctrlr=ctrl['ctrlr'], found='readonly=%s' % readonly,
                wanted='access_mode=%s' % props.get('access_mode'))

    def _set_socket_access(self, path):
        conf = self.conf
        uid = (pwd.getpwnam(conf.vhost_socket_owner).pw_uid
               if conf.vhost_socket_owner else -1)
        gid = (grp.getgrnam(conf.vhost_socket_group).gr_gid
               if conf.vhost_socket_group else -1)
        privileged.set_socket_access(
            path, uid, gid, conf_check.socket_mode(conf.vhost_socket_mode))

    def _undo(self, undo):
        for step in reversed(undo):
            try:
                step()
            except spdk_exc.SpdkRpcError as err:
                LOG.warning('Could not undo a step of a failed connect: '
                            '%s', err)
        if undo:
            self.saved.save_quietly()

    @trace.traced
    @synchronized
    @target_errors
    def connect_volume(self, connection_properties):
        """Create (or find) the volume's vhost-blk controller.

        Idempotent: a second call returns the same controller. A failed
        call undoes what it created, and only that.
        """
        props = properties.ConnectionProperties(connection_properties)
        undo = []
        try:
            return self._connect(props.controller, props, undo)
        except Exception:
            with excutils.save_and_reraise_exception():
                self._undo(undo)

    def _connect(self, name, props, undo):
        """Four round trips for a new local attachment without QoS.

        The reactors (which also say whether the controller exists and
        each core's load), the layer, the controller, and the controller
        again by name once the saved file has it: proof the target still
        has it, and where its socket is. The layer's and controller's
        entries are written into the saved file as the calls made them.
        """
        topology = numa.Topology.read(self.client)
        ctrl = (self.client.vhost_controller(name)
                if name in topology.threads else None)
        bdev = self.backing.served(ctrl, props) if ctrl is not None else None
        entry = None
        if bdev is None:
            bdev, entry = self.backing.make(props, undo)
        if ctrl is not None:
            entries = self._entries(ctrl, bdev, props)
        # Limits before the controller: no guest may run without them.
        if frontend_qos.apply(self.client, bdev, props.qos_specs):
            entry = None  # the bdev subsystem changed more: read it again
        if ctrl is None:
            entries = self._create_controller(name, bdev, props, undo,
                                              topology)
        # Durable before reported: a restart from now on brings it back.
        ctrl = self.saved.save_with(name, entries, entry)
        self._set_socket_access(ctrl['socket'])
        return self._device_info(ctrl, topology)

    # -- disconnect --------------------------------------------------------

    def _try_delete(self, name, ctrl):
        """One deletion attempt: True when gone, False while a guest holds it.

        Real SPDK never answers EBUSY here: ``vhost_delete_controller`` on
        a controller with a connected guest re-queues itself until the
        guest goes, so the call hangs past our timeout and the controller
        is deleted later, under whoever reattached meanwhile. So a
        controller with a session is not asked to go at all. ``ctrl``:
        the controller as just looked up (None: gone).
        """
        if ctrl is None:
            return True
        if ctrl.get('sessions'):
            return False
        try:
            self.client.vhost_delete_controller(name)
        except spdk_exc.NotFound:
            pass
        except spdk_exc.Busy:
            return False
        return True

    def _delete_controller(self, name, force, ctrl=False):
        """Delete, retrying while a guest holds it. Whether it is gone.

        ``ctrl``: the controller if the caller has just looked it up.
        """
        attempts = self.conf.disconnect_retries + 1
        for attempt in range(1, attempts + 1):
            if ctrl is False or attempt > 1:
                ctrl = self.client.vhost_controller(name)
            if self._try_delete(name, ctrl):
                return True
            LOG.debug('vhost-blk controller %(name)s still in use '
                      '(attempt %(n)d of %(total)d)',
                      {'name': name, 'n': attempt, 'total': attempts})
            if attempt < attempts:
                time.sleep(self.conf.disconnect_retry_interval)
        if not force:
            raise errors.VolumeStillInUse(ctrlr=name, attempts=attempts)
        LOG.warning('Forced disconnect: vhost-blk controller %s still has '
                    'a guest connected and is left in place', name)
        return False

    @trace.traced
    @synchronized
    @target_errors
    def disconnect_volume(self, connection_properties, device_info,
                          force=False, ignore_errors=False):
        """Delete the attachment's controller and what it alone used.

        Only this attachment's controller is deleted; the volume's layer
        or NVMe controller goes only when no other controller (another
        guest of a multiattach volume) uses it. ``force``: go on past a
        failed step (a controller a guest still holds is left in place);
        the errors are raised together at the end (ExceptionChainer)
        unless ``ignore_errors``.
        """
        props = properties.ConnectionProperties(connection_properties,
                                                strict=False)
        chainer = brick_exception.ExceptionChainer()
        self.saved.until_gone(props.controller, lambda: self._disconnect(
            props, force, chainer))
        if chainer:
            LOG.warning('Disconnecting %s had errors: SPDK objects of the '
                        'volume may be left behind', props.controller)
            if not ignore_errors:
                raise chainer

    def _disconnect(self, props, force, chainer):
        """One round of a disconnect.

        Returns whether the controller went, and the saved-config entry
        of the bdev that went with it, if that is the only other change.
        Four round trips for a local attachment: the controller (does a
        guest hold it?), its deletion, the layer's, and the saved
        ``vhost_blk`` config (proof it is gone).
        """
        name = props.controller
        gone, used, removed = False, None, None
        with chainer.context(force, 'Deleting vhost-blk controller %s '
                             'failed', name):
            ctrl = self.client.vhost_controller(name)
            used = backing.controller_bdev(ctrl) if ctrl is not None else None
            gone = self._delete_controller(name, force, ctrl)
        if gone:
            with chainer.context(force, 'Releasing the bdev of %s failed',
                                 name):
                removed = self.backing.release(props, used)
        return gone, removed

    # -- the rest of the os-brick interface --------------------------------

    @trace.traced
    @target_errors
    def extend_volume(self, connection_properties):
        """The new size in bytes; SPDK tells the guest by itself.

        SPDK sends the guest a virtio config change when its bdev grows
        (an lvol resized by Cinder, or an NVMe namespace change notice),
        so there is nothing to rescan: only the size to report.
        """
        ctrl = self.client.vhost_controller(properties.ConnectionProperties(
            connection_properties, strict=False).controller)
        bdev = backing.controller_bdev(ctrl) if ctrl is not None else None
        if not bdev:
            return None
        info = self.client.bdev_get_bdevs(name=bdev)[0]
        return info['num_blocks'] * info['block_size']

    @target_errors
    def get_volume_paths(self, connection_properties):
        ctrl = self.client.vhost_controller(properties.ConnectionProperties(
            connection_properties, strict=False).controller)
        return [ctrl['socket']] if ctrl is not None else []

    def _our_controllers(self):
        return [ctrl for ctrl in self.client.vhost_get_controllers()
                if ctrl['ctrlr'].startswith(properties.CONTROLLER_PREFIX)]

    @target_errors
    def get_search_path(self):
        """The target's vhost socket directory (``spdk_tgt -S``).

        SPDK does not report it; it is read off an existing controller's
        socket, so it is None on a host with no attachment yet.
        """
        for ctrl in self.client.vhost_get_controllers():
            return os.path.dirname(ctrl['socket'])
        return None

    @target_errors
    def get_all_available_volumes(self, connection_properties=None):
        return [ctrl['socket'] for ctrl in self._our_controllers()]

    @target_errors
    def check_valid_device(self, path, run_as_root=True):
        """Whether ``path`` is a socket of a live SPDK vhost controller."""
        try:
            if not stat.S_ISSOCK(os.stat(path).st_mode):
                return False
        except OSError:
            return False
        return any(ctrl['socket'] == path
                   for ctrl in self.client.vhost_get_controllers())
