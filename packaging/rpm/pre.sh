# cks-drift %pre: the service's system user and group, before the files that belong to them
# are laid down.
getent group cks-drift >/dev/null || groupadd --system cks-drift
getent passwd cks-drift >/dev/null ||
    useradd --system --gid cks-drift --home-dir /var/lib/cks-drift --no-create-home \
        --shell /sbin/nologin --comment "cks-drift daemon" cks-drift
exit 0
