# cks-drift %preun: on erase (not upgrade), stop and disable the service and its socket unit
# (the socket first: it would start the service again at the next connection).
if [ "$1" -eq 0 ] && [ -d /run/systemd/system ]; then
    systemctl --no-reload disable --now cks-drift.socket cks-drift.service >/dev/null 2>&1 || :
fi
exit 0
