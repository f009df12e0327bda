"""What a target serves, object by object, to compare across a restart.

The upgrade command (:mod:`spdk_vhost_core.upgrade`) takes an
inventory before it stops a target and waits until the new one has the
same: every vhost controller and the bdev it serves, every NVMe-oF
subsystem with its namespaces, listeners and allowed hosts, every key of
the keyring, every bdev_nvme attachment (a compute host's remote
volumes) and every QoS limit. Only fields both supported SPDK releases
report alike are compared. Methods the application lacks (``vhost`` has
no ``nvmf_*``, ``nvmf_tgt`` no ``vhost_*``) leave their kind out.
"""

from spdk_vhost_core import exception as exc


def _vhost(client):
    out = {}
    for ctrl in client.call('vhost_get_controllers'):
        block = (ctrl.get('backend_specific') or {}).get('block') or {}
        out[ctrl['ctrlr']] = {'bdev': block.get('bdev'),
                              'cpumask': ctrl.get('cpumask')}
    return out


def _listener(addr):
    return '%s:%s:%s' % (addr.get('trtype'), addr.get('traddr'),
                         addr.get('trsvcid'))


def _nvmf(client):
    out = {}
    for sub in client.call('nvmf_get_subsystems'):
        if sub.get('subtype') == 'Discovery':
            continue
        out[sub['nqn']] = {
            'listeners': sorted(_listener(a)
                                for a in sub.get('listen_addresses', ())),
            'hosts': sorted(h['nqn'] for h in sub.get('hosts', ())),
            'allow_any_host': sub.get('allow_any_host'),
            'namespaces': sorted('%s=%s' % (ns.get('nsid'),
                                            ns.get('bdev_name'))
                                 for ns in sub.get('namespaces', ())),
        }
    return out


def _keys(client):
    return {key['name']: key.get('path')
            for key in client.call('keyring_get_keys')}


def _nvme(client):
    return {ctrl['name']: sorted(
        '%s %s' % (path.get('trid', {}).get('subnqn'),
                   _listener(path.get('trid', {})))
        for path in ctrl.get('ctrlrs', ()))
        for ctrl in client.call('bdev_nvme_get_controllers')}


def _qos(client):
    out = {}
    for bdev in client.call('bdev_get_bdevs'):
        limits = {k: v for k, v in
                  (bdev.get('assigned_rate_limits') or {}).items() if v}
        if limits:
            out[bdev['name']] = limits
    return out


KINDS = (('vhost controllers', _vhost),
         ('NVMe-oF subsystems', _nvmf),
         ('keys', _keys),
         ('NVMe-oF attachments', _nvme),
         ('QoS limits', _qos))


def take(client):
    """``{kind: {name: fields}}`` of every kind the target serves."""
    inventory = {}
    for kind, read in KINDS:
        try:
            inventory[kind] = read(client)
        except exc.MethodNotFound:
            continue
    return inventory


def differences(before, after):
    """What of ``before`` ``after`` lacks or has changed, in words.

    Objects only ``after`` has are reported too: a restart must not add
    any. An empty list means the same.
    """
    problems = []
    for kind, objects in before.items():
        now = after.get(kind)
        if now is None:
            problems.append('%s: the target no longer lists them' % kind)
            continue
        for name, fields in sorted(objects.items()):
            if name not in now:
                problems.append('%s: %s missing' % (kind, name))
            elif now[name] != fields:
                problems.append('%s: %s is %s, was %s'
                                % (kind, name, now[name], fields))
        for name in sorted(set(now) - set(objects)):
            problems.append('%s: %s is new' % (kind, name))
    return problems


def connected_hosts(client):
    """``{subsystem NQN: [host NQN]}`` of hosts connected right now."""
    out = {}
    try:
        subsystems = client.call('nvmf_get_subsystems')
    except exc.MethodNotFound:
        return out
    for sub in subsystems:
        if sub.get('subtype') == 'Discovery':
            continue
        ctrls = client.call('nvmf_subsystem_get_controllers',
                            {'nqn': sub['nqn']})
        hosts = sorted({c.get('hostnqn') for c in ctrls})
        if hosts:
            out[sub['nqn']] = hosts
    return out
