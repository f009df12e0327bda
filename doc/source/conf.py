"""Sphinx configuration for the spdk-vhost documentation."""

extensions = [
    'openstackdocstheme',
    'oslo_config.sphinxext',
]

openstackdocs_repo_name = 'openstack/spdk-vhost'
openstackdocs_use_storyboard = False
openstackdocs_auto_name = False
project = 'spdk-vhost'
copyright = 'spdk-vhost developers'
master_doc = 'index'
exclude_patterns = ['_build']
pygments_style = 'native'
html_theme = 'openstackdocs'
