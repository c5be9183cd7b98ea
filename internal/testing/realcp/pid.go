package realcp

// APIServerPID is the process id of the running kube-apiserver (0 when it
// is not running): for measurements that read its /proc entries.
func (cp *ControlPlane) APIServerPID() int {
	if cp.apiserver == nil {
		return 0
	}
	return cp.apiserver.cmd.Process.Pid
}
