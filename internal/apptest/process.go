package apptest

import (
	"maps"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// RunsReadsync, set to 1 in a process's environment, makes a test binary
// run readsync's Main instead of the tests: a test that needs readsync as
// a process of its own (one it signals, kills and restarts, whose process
// metrics are its own) runs it so, with the race detector of the tests.
// The TestMain of a package that starts readsync so must check it:
//
//	if os.Getenv(apptest.RunsReadsync) == "1" {
//		os.Exit(app.Main(build))
//	}
const RunsReadsync = "TEST_BINARY_RUNS_READSYNC"

// Process is a program a test runs and stops as the kubelet would.
type Process struct {
	name string
	cmd  *exec.Cmd
	// Log is what the process wrote to its standard output and error.
	Log  *LockedBuffer
	done chan struct{} // closed once the process has exited and its output is read
	code int
}

// StartProcess starts cmd with its output in Log; the test's end stops it.
func StartProcess(t *testing.T, name string, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{name: name, cmd: cmd, Log: &LockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Log, p.Log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		defer close(p.done)
		_ = cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
	}()
	t.Cleanup(func() { p.Stop(t) })
	return p
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits for the process to exit and returns its exit code.
func (p *Process) Wait() int {
	<-p.done
	return p.code
}

// Kill sends SIGKILL and waits for the process to exit.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill() // os.ErrProcessDone once it has exited
	<-p.done
}

// Stop sends SIGTERM and returns the exit code once the process has
// exited; it may be called again. One that has not exited a minute later is
// killed: never a readsync in the middle of a statement otherwise, which
// the current release's test server does not survive.
func (p *Process) Stop(t *testing.T) int {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // os.ErrProcessDone once it has exited
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not exit within a minute of SIGTERM; output:\n%s", p.name, p.Log.String())
	}
	return p.code
}

// StartReadsync runs readsync with args as a process of its own, this test
// binary under RunsReadsync, with the fixture's environment and nothing
// else.
func (f *Fixture) StartReadsync(t *testing.T, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = []string{RunsReadsync + "=1"}
	for _, k := range slices.Sorted(maps.Keys(f.Env)) {
		cmd.Env = append(cmd.Env, k+"="+f.Env[k])
	}
	p := StartProcess(t, "readsync", cmd)
	t.Cleanup(func() {
		p.Stop(t) // the whole output
		f.NoSecrets(t, p.Log.String())
	})
	return p
}
