"""Reading the repository's INI files (config snippets, units) in tests."""

import configparser
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The config snippets the install guide includes.
SNIPPETS = os.path.join(ROOT, 'etc', 'spdk-vhost')


def read(path, strict=True):
    """``path`` parsed as written: keys keep their case, no ``%`` magic.

    ``strict=False`` for systemd units, which repeat keys.
    """
    parser = configparser.ConfigParser(interpolation=None, strict=strict)
    parser.optionxform = str
    if not parser.read(path):
        raise FileNotFoundError(path)
    return parser


def own_options(parser, section):
    """The options set in ``section`` itself (not inherited from DEFAULT)."""
    if section == 'DEFAULT':
        return set(parser.defaults())
    return set(parser[section]) - set(parser.defaults())
