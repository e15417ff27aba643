# cks-drift %post: the service's state folder, and systemd learns the units. Neither the
# service nor its socket unit is enabled or started: the service needs the API keys and an
# SSH key in /etc/cks-drift/cks-drift.toml first; then the administrator enables and starts
# both units (docs/service.md, "Under systemd").
[ -d /var/lib/cks-drift ] || install -d -o cks-drift -g cks-drift -m 0700 /var/lib/cks-drift
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
exit 0
