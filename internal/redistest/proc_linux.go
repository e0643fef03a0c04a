//go:build linux

package redistest

import (
	"os/exec"
	"syscall"
)

// setPdeathsig makes the kernel kill the server if the test binary dies
// without running its cleanups.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
