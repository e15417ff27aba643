# cks-drift %pre: the service's system user and group, before the files that belong to them
# are laid down.
getent group cks-drift >/dev/null || groupadd --system cks-drift
getent passwd cks-drift >/dev/null ||
    useradd --system --gid cks-drift --home-dir /var/lib/cks-drift --no-create-home \
        --shell /sbin/nologin --comment "cks-drift daemon" cks-drift
# /etc/cks-drift holds the config and, beside it, the API key files: readable by the
# service's group, never by others (the .deb sets the same). It is made here, before the
# config file is laid down, because rpm would create it 0755 root:root; an upgrade from a
# release that left it so tightens it; any other mode is an administrator's and stays.
if [ ! -e /etc/cks-drift ]; then
    install -d -o root -g cks-drift -m 0750 /etc/cks-drift
elif [ "$(stat -c '%a %U:%G' /etc/cks-drift)" = "755 root:root" ]; then
    chown root:cks-drift /etc/cks-drift && chmod 0750 /etc/cks-drift
fi
exit 0
