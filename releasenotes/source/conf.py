"""Sphinx configuration for the spdk-vhost release notes."""

extensions = [
    'openstackdocstheme',
    'reno.sphinxext',
]

openstackdocs_repo_name = 'openstack/spdk-vhost'
openstackdocs_use_storyboard = False
openstackdocs_auto_name = False
project = 'spdk-vhost Release Notes'
copyright = 'spdk-vhost developers'
master_doc = 'index'
html_theme = 'openstackdocs'
