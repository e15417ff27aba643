# cks-drift %postun: after an upgrade a running service restarts with the new binary (its
# socket unit does not, so that the port stays held). The
# user and group stay after an erase (their ids may still own files), and so does
# /var/lib/cks-drift if it holds state.
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
    if [ "$1" -ge 1 ]; then
        systemctl try-restart cks-drift.service >/dev/null 2>&1 || :
    fi
fi
exit 0
