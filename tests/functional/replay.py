"""Replay a recorded SPDK transcript against targets and compare.

Rules (transcripts/README.md gives the file format):

* ``<uuid:N>`` in a request is replaced by the UUID bound to N; the first
  time N appears in a request a fresh UUID is made up. In an expected
  response the first appearance of N binds it to what the target
  answered, which must be a UUID different from every other bound one;
  later appearances must equal it.
* ``<vhost-dir>``, ``<compute-vhost-dir>`` and ``<work-dir>`` become the
  storage target's vhost dir, the compute target's and a temp dir.
* Listener ports: a transcript's TCP port (e.g. 4420) may be busy on a CI
  machine, so every ``trsvcid`` value seen is mapped, consistently for the
  whole scenario and in both requests and expected responses, to a port
  that was free when first seen.
* A 32-hex-digit NGUID in an expected response is the recorded bdev UUID
  without dashes (the recorder did not placeholder it); it must equal
  the dash-less upper-case form of the ``uuid`` next to it.
* ``ignore`` paths: dotted keys, ``[*]`` for every list element, ``*``
  for every key (the key set is still compared).
* Preconditions the recording target had: SPDK cannot delete an NVMe-oF
  transport, so the recording target still had the TCP transport of an
  earlier scenario; where a scenario's first ``nvmf_create_transport``
  expects "already exists", the replay creates it beforehand.
* ``bdev_lvol_check_shallow_copy`` expecting a final state is re-issued
  while the copy is "in progress" (the recording checked after the
  background copy had finished).
* ``<check>`` calls run the named check below; an unknown one fails.

Where the machine that replays differs from the recording one, the replay
adapts the target or the comparison, never the recorded answers:

* The recording ran ``spdk_tgt -m 0x3`` (two reactors) and its answers
  name that mask (a controller's default cpumask, 0x100 refused, 0x2
  accepted). Test targets must leave core 1 to TCG guests, so the
  storage target gets the same two reactors as two threads on CPU 0
  (``--lcores 0@0,1@0``): the app core mask is still 0x3.
* The recorded target was built from git and reports ``git sha1 <commit>``
  in ``spdk_get_version``; one built from a release archive (as
  tools/build-spdk.sh does without network) has no commit at all. When the
  answer has no ``fields.commit``, the expected one is compared without
  the commit field and without the `` git sha1 ...`` suffix; major, minor,
  patch and suffix are still compared.
* The transcripts were recorded on v26.05 and are replayed on every
  supported release (test_conformance.py): on another one, the expected
  version answer names that release (see ``_other_release``).
"""

import json
import os
import re
import time
import uuid as uuidlib

from spdk_vhost_core import spdk_version
from testbed import net
from testbed import spdk_target

TRANSCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'transcripts')
IMAGE_SIZE = 4 * 1024 * 1024
_UUID_RE = r'[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}'
_PLACEHOLDER = re.compile(r'<uuid:(\d+)>')
_NGUID = re.compile(r'^[0-9A-F]{32}$')


#: The recording target's reactors (``-m 0x3``), both threads on CPU 0.
RECORDED_LCORES = '0@0,1@0'


def target(name, tree=None):
    """A fresh real ``spdk_tgt`` with the recording one's two reactors.

    ``tree``: the SPDK build to run (spdk_build.tree), default the suite's.
    """
    return spdk_target.SpdkTarget(app='spdk_tgt', lcores=RECORDED_LCORES,
                                  name=name, tree=tree)


def _without_commit(want, have):
    """The recorded version answer, as a build with no git commit gives it.

    See the module docstring: only the build's commit is dropped.
    """
    fields = have.get('result', {}).get('fields') if isinstance(
        have.get('result'), dict) else None
    if not isinstance(fields, dict) or 'commit' in fields:
        return want
    want = json.loads(json.dumps(want))
    commit = want['result']['fields'].pop('commit', None)
    if commit:
        want['result']['version'] = want['result']['version'].replace(
            ' git sha1 %s' % commit, '')
    return want


def _other_release(want, have):
    """The recorded version answer, for the supported release replaying.

    The transcripts were recorded on v26.05; replayed on another
    supported release (spdk_version.SUPPORTED), the expected major, minor
    and ``version`` text are that release's; patch and suffix are still
    compared, and an unsupported release still fails.
    """
    fields = have.get('result', {}).get('fields') if isinstance(
        have.get('result'), dict) else None
    if not isinstance(fields, dict):
        return want
    found = (fields.get('major'), fields.get('minor'))
    recorded = want['result']['fields']
    if (found == (recorded['major'], recorded['minor']) or
            found not in spdk_version.SUPPORTED):
        return want
    want = json.loads(json.dumps(want))
    want['result']['fields'].update(major=found[0], minor=found[1])
    want['result']['version'] = want['result']['version'].replace(
        'v%s' % spdk_version.label((recorded['major'], recorded['minor'])),
        'v%s' % spdk_version.label(found))
    return want


ADAPT = {'spdk_get_version': lambda want, have: _without_commit(
    _other_release(want, have), have)}

#: Where v26.01 answers differently from the v26.05 recording, per method:
#: (keys it lacks, keys it adds, keys whose values differ: v26.01's
#: ``dma_device_type`` is the number 1 where v26.05 says ``'DMA'``), as
#: paths inside ``result``. Found by
#: replaying every transcript on v26.01; the drivers use none of them
#: (os_brick_connector/numa.py already treats a missing ``numa_id`` as an
#: unknown node).
V26_01_DIFFERENCES = {
    'framework_get_reactors': ([('reactors', '*', 'numa_id')], [], []),
    'nvmf_get_subsystems': ([('*', 'dmrsl'), ('*', 'wzsl')], [], []),
    'bdev_get_bdevs': ([], [('*', 'memory_domains', '*', 'dma_device_id')],
                       [('*', 'memory_domains', '*', 'dma_device_type')]),
}

#: Calls v26.05 refuses and v26.01 still answers: ``bdev_get_iostat``
#: with the old ``name`` parameter (the client sends ``names``, which
#: both take). Replayed on v26.01 they must succeed.
V26_01_ACCEPTS = {('bdev_get_iostat', 'name')}


def _parents(obj, path):
    """Every dict at ``path[:-1]`` inside ``obj`` (``'*'``: each item)."""
    if not path[:-1]:
        if isinstance(obj, dict):
            yield obj
        return
    head, rest = path[0], path[1:]
    items = (obj if head == '*' and isinstance(obj, list) else
             [obj.get(head)] if isinstance(obj, dict) else [])
    for item in items:
        if item is not None:
            yield from _parents(item, rest)


def release_adapted(want, differences):
    """``want`` as the release of ``differences`` answers it.

    Keys that release lacks leave the expected answer; keys it adds are
    expected and their values ignored (so the key set is still compared);
    keys whose values differ have their values ignored.
    """
    lacks, adds, differ = differences
    if 'result' not in want:
        return want
    want = json.loads(json.dumps(want))
    for path in lacks:
        for parent in _parents(want['result'], path):
            parent.pop(path[-1], None)
    for path in adds:
        for parent in _parents(want['result'], path):
            parent[path[-1]] = None
    for path in adds + differ:
        want.setdefault('ignore', []).append('result' + ''.join(
            '[*]' if p == '*' else '.' + p for p in path))
    return want


class ReplayError(AssertionError):
    pass


def scenario_files():
    return sorted(f for f in os.listdir(TRANSCRIPTS)
                  if f.endswith('.json') and f != 'save_config.full.json'
                  and 'calls' in load(f))


def load(name):
    with open(os.path.join(TRANSCRIPTS, name)) as src:
        return json.load(src)


def image_pattern(size=IMAGE_SIZE):
    """Bytes no zero-filled or shifted copy can match by accident."""
    block = bytes((i * 7 + 3) % 251 for i in range(4096))
    return b''.join(block[:1] + (n).to_bytes(4, 'big') + block[5:]
                    for n in range(size // 4096))


def _parse_path(path):
    tokens = []
    for part in path.split('.'):
        while part.endswith('[*]'):
            tokens_tail = ['[*]']
            part = part[:-3]
            if part:
                tokens.append(part)
            tokens.extend(tokens_tail)
            part = ''
        if part:
            tokens.append(part)
    return tokens


def _matches(pattern, path):
    if len(pattern) != len(path):
        return False
    for want, have in zip(pattern, path):
        if want == '[*]':
            if not isinstance(have, int):
                return False
        elif want == '*':
            if isinstance(have, int):
                return False
        elif want != have:
            return False
    return True


class Replay(object):
    """One scenario against ``targets = {'storage': fx, 'compute': fx}``."""

    def __init__(self, scenario, targets, work_dir, differences=None,
                 accepts=()):
        self.scenario = scenario
        # How the replaying release differs (V26_01_DIFFERENCES and
        # V26_01_ACCEPTS for v26.01).
        self.differences = differences or {}
        self.accepts = set(accepts)
        self.targets = targets
        self.work_dir = work_dir
        self.uuids = {}
        self.ports = {}

    # -- substitution ---------------------------------------------------
    def _dirs(self):
        dirs = {'<vhost-dir>': self.targets['storage'].vhost_dir,
                '<work-dir>': self.work_dir}
        if 'compute' in self.targets:
            dirs['<compute-vhost-dir>'] = self.targets['compute'].vhost_dir
        return dirs

    def port(self, recorded):
        if recorded not in self.ports:
            self.ports[recorded] = str(net.free_port())
        return self.ports[recorded]

    def _fill_string(self, text):
        def fresh(match):
            n = match.group(1)
            if n not in self.uuids:
                self.uuids[n] = str(uuidlib.uuid4())
            return self.uuids[n]
        text = _PLACEHOLDER.sub(fresh, text)
        for key, value in self._dirs().items():
            text = text.replace(key, value)
        return text

    def fill(self, value, key=None):
        """A request with placeholders, dirs and ports substituted."""
        if isinstance(value, dict):
            return {k: self.fill(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.fill(v) for v in value]
        if isinstance(value, str):
            if key == 'trsvcid':
                return self.port(value)
            return self._fill_string(value)
        return value

    # -- comparison -----------------------------------------------------
    def _compare_string(self, want, have, where, parent):
        if not isinstance(have, str):
            raise ReplayError('%s: expected %r, got %r' % (where, want, have))
        if _NGUID.match(want) and isinstance(parent, dict) and (
                'uuid' in parent):
            if have != str(parent.get('uuid')).replace('-', '').upper():
                raise ReplayError('%s: NGUID %r is not the uuid' % (
                    where, have))
            return
        for key, value in self._dirs().items():
            want = want.replace(key, value)
        pattern, names = '', []
        pos = 0
        for match in _PLACEHOLDER.finditer(want):
            pattern += re.escape(want[pos:match.start()])
            pattern += '(%s)' % _UUID_RE
            names.append(match.group(1))
            pos = match.end()
        pattern += re.escape(want[pos:])
        found = re.fullmatch(pattern, have)
        if not found:
            raise ReplayError('%s: expected %r, got %r' % (where, want, have))
        for n, value in zip(names, found.groups()):
            if n in self.uuids:
                if self.uuids[n] != value:
                    raise ReplayError('%s: <uuid:%s> is %s, got %s' % (
                        where, n, self.uuids[n], value))
            elif value in self.uuids.values():
                raise ReplayError('%s: <uuid:%s> should be a new UUID, got '
                                  'one already seen: %s' % (where, n, value))
            else:
                self.uuids[n] = value

    def compare(self, want, have, ignore, path=(), parent=None):
        where = '.'.join(str(t) for t in path)
        if any(_matches(p, list(path)) for p in ignore):
            return
        if isinstance(want, dict):
            if not isinstance(have, dict) or set(want) != set(have):
                raise ReplayError('%s: expected keys %s, got %r' % (
                    where, sorted(want), have))
            for key in want:
                self.compare(want[key], have[key], ignore, path + (key,),
                             have)
        elif isinstance(want, list):
            if not isinstance(have, list) or len(want) != len(have):
                raise ReplayError('%s: expected %r, got %r' % (
                    where, want, have))
            for i, (w, h) in enumerate(zip(want, have)):
                self.compare(w, h, ignore, path + (i,), have)
        elif isinstance(want, str):
            if path and path[-1] == 'trsvcid':
                want = self.port(want)
            self._compare_string(want, have, where, parent)
        elif want != have or type(want) is not type(have):
            raise ReplayError('%s: expected %r, got %r' % (where, want, have))

    def check_response(self, call, response):
        call = ADAPT.get(call['method'], lambda want, have: want)(
            call, response)
        if call['method'] in self.differences:
            call = release_adapted(call, self.differences[call['method']])
        if 'error' in call and any(
                (call['method'], key) in self.accepts
                for key in call.get('params') or {}):
            if 'result' not in response:
                raise ReplayError('expected a result (this release takes '
                                  'the old parameter), got %r' % (response,))
            return
        ignore = [_parse_path(p) for p in call.get('ignore', [])]
        kind = 'result' if 'result' in call else 'error'
        if ['result'] in ignore and ['error'] in ignore:
            return
        if kind not in response:
            raise ReplayError('expected %s %r, got %r' % (
                kind, call[kind], response))
        self.compare(call[kind], response[kind], ignore, (kind,))

    # -- running --------------------------------------------------------
    def _preconditions(self):
        for name in ('storage', 'compute'):
            first = next((c for c in self.scenario['calls']
                          if c['method'] == 'nvmf_create_transport' and
                          c.get('target', 'storage') == name), None)
            if first and 'already exists' in first.get('error', {}).get(
                    'message', ''):
                self.targets[name].call('nvmf_create_transport',
                                        self.fill(first['params']))

    def _call(self, call):
        target = self.targets[call.get('target', 'storage')]
        response = target.call(call['method'], self.fill(call.get('params')))
        if call['method'] == 'bdev_lvol_check_shallow_copy' and (
                call.get('result', {}).get('state') != 'in progress'):
            deadline = time.monotonic() + 60
            while (response.get('result', {}).get('state') == 'in progress'
                   and time.monotonic() < deadline):
                time.sleep(0.1)
                response = target.call(call['method'],
                                       self.fill(call.get('params')))
        return response

    def run(self, checks):
        self._preconditions()
        for index, call in enumerate(self.scenario['calls']):
            label = '%s call #%d %s' % (self.scenario['scenario'], index,
                                        call['method'])
            try:
                if call['method'] == '<check>':
                    check = checks.get(call.get('why'))
                    if check is None:
                        raise ReplayError('unknown check %r' % call.get(
                            'why'))
                    self.compare(call['result'], check(self), [])
                    continue
                self.check_response(call, self._call(call))
            except ReplayError as err:
                raise ReplayError('%s: %s' % (label, err)) from err


def check_export_holds_image(replay):
    """The shallow copy wrote the image's bytes into export.raw."""
    with open(os.path.join(replay.work_dir, 'image.raw'), 'rb') as src:
        image = src.read()
    with open(os.path.join(replay.work_dir, 'export.raw'), 'rb') as src:
        export = src.read(len(image))
    if export != image:
        raise ReplayError('export.raw does not hold the image bytes')
    return True


CHECKS = {'export file holds the image bytes': check_export_holds_image}


def prepare_work_dir(work_dir):
    """The files the scenarios' aio bdevs open."""
    with open(os.path.join(work_dir, 'image.raw'), 'wb') as out:
        out.write(image_pattern())
    with open(os.path.join(work_dir, 'export.raw'), 'wb') as out:
        out.truncate(IMAGE_SIZE)
