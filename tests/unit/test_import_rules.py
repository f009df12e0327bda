"""The one-way import rules of doc/source/contributor/architecture.rst.

Every module of the project is parsed (not imported) and each import of
another project package is checked against what its package may use.
"""

import ast
import os

import testtools

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PRODUCT = ('spdk_vhost_core', 'os_brick_connector', 'cinder_spdk_vhost',
           'nova_vhost_user', 'spdk_vhost_agent', 'tempest_plugin')
SUPPORT = ('testbed', 'tools', 'tests')
#: Package -> the project packages it may import.
ALLOWED = {
    'spdk_vhost_core': set(),
    'os_brick_connector': {'spdk_vhost_core'},
    'cinder_spdk_vhost': {'spdk_vhost_core'},
    'nova_vhost_user': {'spdk_vhost_core', 'os_brick_connector'},
    'spdk_vhost_agent': {'spdk_vhost_core'},
    'tempest_plugin': {'spdk_vhost_core'},
    'testbed': set(PRODUCT),
    'tools': set(PRODUCT) | {'testbed'},
    'tests': set(PRODUCT) | {'testbed', 'tools'},
}


def imported_modules(tree):
    """Absolute module names a parsed module imports, anywhere in it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module


def python_files(package):
    for root, _dirs, files in os.walk(os.path.join(REPO, package)):
        for name in sorted(files):
            if name.endswith('.py'):
                yield os.path.join(root, name)


def imports_by_file(package):
    for path in python_files(package):
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        yield (os.path.relpath(path, REPO),
               {m.split('.')[0] for m in imported_modules(tree)})


def broken_rules(package):
    own = set(PRODUCT + SUPPORT)
    broken = []
    for path, tops in imports_by_file(package):
        for top in sorted((tops & own) - ALLOWED[package] - {package}):
            broken.append('%s imports %s' % (path, top))
        if {'cinder', 'nova'} <= tops:
            broken.append('%s imports both cinder and nova' % path)
    return broken


class ImportRulesTest(testtools.TestCase):

    def test_every_package_imports_only_what_it_may(self):
        broken = []
        for package in ALLOWED:
            broken += broken_rules(package)
        self.assertEqual([], broken)

    def test_the_rules_see_a_forbidden_import(self):
        tree = ast.parse('from tests import base\nimport cinder.volume\n'
                         'from nova import objects\n')
        self.assertEqual({'tests', 'cinder', 'nova'},
                         {m.split('.')[0] for m in imported_modules(tree)})

    def test_every_python_directory_has_rules(self):
        # Sphinx's conf.py files are not part of any package.
        holders = {name for name in os.listdir(REPO)
                   if not name.startswith('.')
                   and name not in ('doc', 'releasenotes')
                   and any(python_files(name))}
        self.assertEqual(set(ALLOWED), holders)
