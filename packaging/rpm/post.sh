# cks-drift %post: the service's state folder, and systemd learns the unit. The service is
# neither enabled nor started: it needs the API keys and an SSH key in
# /etc/cks-drift/cks-drift.toml first.
[ -d /var/lib/cks-drift ] || install -d -o cks-drift -g cks-drift -m 0700 /var/lib/cks-drift
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
exit 0
