#!/bin/bash
# MariaDB and RabbitMQ on loopback for the Cinder deployment tests
# (tests/deployment). Idempotent: a server already answering on its port
# is reused as it is; a missing one is installed from Debian packages and
# started with its init script (CI containers have no systemd). A fresh
# MariaDB gets what the tests expect: root with an empty password over
# TCP. RabbitMQ's default guest/guest account is loopback-only already.
set -euo pipefail

listening() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

wait_port() {
    local port=$1 name=$2
    for _ in $(seq 120); do
        listening "$port" && return 0
        sleep 1
    done
    echo "$name did not start listening on 127.0.0.1:$port" >&2
    exit 1
}

install_missing() {
    "$(dirname "$0")/install-debs.sh" "$@"
}

if listening 3306; then
    echo "services: MariaDB already listening on 127.0.0.1:3306, reused"
else
    install_missing mariadb-server mariadb-client
    service mariadb start
    wait_port 3306 MariaDB
    # Debian's root logs in through the Unix socket only; the tests
    # connect over TCP as root with an empty password.
    mariadb -uroot -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA \
unix_socket OR mysql_native_password USING PASSWORD('')"
fi

if listening 5672; then
    echo "services: RabbitMQ already listening on 127.0.0.1:5672, reused"
else
    install_missing rabbitmq-server
    service rabbitmq-server start
    wait_port 5672 RabbitMQ
fi
