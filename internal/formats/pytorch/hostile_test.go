package pytorch

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats/formattest"
	"github.com/mstore/mstore/internal/testenv"
)

// call is a pickle that calls module.name(args…) at the top level, as an
// attacker's __reduce__ does.
func call(module, name string, args ...string) []byte {
	p := newPickle().global(module, name).op(opMark)
	for _, a := range args {
		p.str(a)
	}
	return p.op(opTuple, opReduce).stop()
}

// inDict hides a call inside a state dict, next to a real tensor.
func inDict(module, name string, args ...string) []byte {
	p := newPickle().dict().str("evil").global(module, name).op(opMark)
	for _, a := range args {
		p.str(a)
	}
	p.op(opTuple, opReduce)
	return p.str("w").rebuild("FloatStorage", "0", 4, 0, []int64{4}, []int64{1}).end()
}

// Hostile pickles, each refused with its class and, where there is one,
// the global it reaches named in the message.
func TestHostilePickles(t *testing.T) {
	deep := newPickle()
	for range 200 {
		deep.op(opMark)
	}
	chain := newPickle().op(opNone)
	for range 200 {
		chain.op(opTuple1)
	}
	cycle := newPickle().op(opEmptyList, opBinPut, 0, opBinGet, 0, opAppend).stop()
	for _, tc := range []struct {
		name  string
		pkl   []byte
		class errs.Class
		names []string
	}{
		{"os.system", call("os", "system", "touch /tmp/x"), errs.SchemaError, []string{"os.system"}},
		{"posix.system", call("posix", "system", "id"), errs.SchemaError, []string{"posix.system"}},
		{"nt.system", call("nt", "system", "dir"), errs.SchemaError, []string{"nt.system"}},
		{"builtins.eval", call("builtins", "eval", "print(1)"), errs.SchemaError, []string{"builtins.eval"}},
		{"builtins.exec", call("builtins", "exec", "import os"), errs.SchemaError, []string{"builtins.exec"}},
		{"python 2 __builtin__.eval", call("__builtin__", "eval", "1"), errs.SchemaError, []string{"builtins.eval"}},
		{"builtins.__import__", call("builtins", "__import__", "os"), errs.SchemaError, []string{"builtins.__import__"}},
		{"builtins.getattr", call("builtins", "getattr"), errs.SchemaError, []string{"builtins.getattr"}},
		{"builtins.open", call("builtins", "open", "/tmp/x", "w"), errs.SchemaError, []string{"builtins.open"}},
		{"subprocess.Popen", call("subprocess", "Popen", "sh"), errs.SchemaError, []string{"subprocess.Popen"}},
		{"subprocess.check_output", call("subprocess", "check_output", "id"), errs.SchemaError, []string{"subprocess.check_output"}},
		{"importlib.import_module", call("importlib", "import_module", "os"), errs.SchemaError, []string{"importlib.import_module"}},
		{"pkgutil.resolve_name", call("pkgutil", "resolve_name", "os:system"), errs.SchemaError, []string{"pkgutil.resolve_name"}},
		{"marshal.loads", call("marshal", "loads", "c"), errs.SchemaError, []string{"marshal.loads"}},
		{"runpy.run_path", call("runpy", "run_path", "/tmp/x.py"), errs.SchemaError, []string{"runpy.run_path"}},
		{"runpy._run_code", call("runpy", "_run_code", "x"), errs.SchemaError, []string{"runpy._run_code"}},
		{"webbrowser.open", call("webbrowser", "open", "http://example.com"), errs.SchemaError, []string{"webbrowser.open"}},
		{"functools.partial", call("functools", "partial"), errs.SchemaError, []string{"functools.partial"}},
		{"hidden in a state dict", inDict("os", "system", "id"), errs.SchemaError, []string{"os.system"}},
		{"torch global not on the allowlist", call("torch.serialization", "load", "x.pt"), errs.SchemaError, []string{"torch.serialization.load"}},
		{"torch hub", call("torch.hub", "load", "x"), errs.SchemaError, []string{"torch.hub.load"}},
		{"a whole nn.Module", newPickle().global("torch.nn.modules.linear", "Linear").op(opEmptyTuple, opNewObj).stop(), errs.SchemaError, []string{"torch.nn.modules.linear.Linear"}},
		{"storage from pickled bytes", call("torch.storage", "_load_from_bytes", "x"), errs.SchemaError, []string{"torch.storage._load_from_bytes"}},
		{"INST", append(newPickle().op(opMark).str("id").b, []byte("ios\nsystem\n.")...), errs.SchemaError, []string{"INST", "os.system"}},
		{"OBJ", newPickle().op(opMark).global("collections", "OrderedDict").op(opObj).stop(), errs.SchemaError, []string{"OBJ"}},
		{"STACK_GLOBAL", newPickle().str("os").str("system").op(opStackGlobal).stop(), errs.SchemaError, []string{"STACK_GLOBAL", "os.system"}},
		{"STACK_GLOBAL with odd operands", newPickle().int(7).op(opEmptyList, opStackGlobal).stop(), errs.SchemaError, []string{"STACK_GLOBAL", "int", "list"}},
		{"STACK_GLOBAL alone", newPickle().op(opStackGlobal).stop(), errs.SchemaError, []string{"STACK_GLOBAL"}},
		{"EXT1", newPickle().op(opExt1, 1).stop(), errs.SchemaError, []string{"EXT1"}},
		{"PERSID", append(newPickle().b, []byte("P0\n.")...), errs.SchemaError, []string{"PERSID"}},
		{"memo read before it is written", newPickle().op(opBinGet, 7).stop(), errs.InvalidArchive, []string{"memo"}},
		{"memo trick: a global stored, then called with a bad argument", newPickle().global("collections", "OrderedDict").op(opBinPut, 1, opPop).b, errs.SchemaError, []string{"POP"}},
		{"memo trick: REDUCE of a memoized string", newPickle().str("os.system").op(opBinPut, 0, opBinGet, 0, opEmptyTuple, opReduce).stop(), errs.SchemaError, []string{"str"}},
		{"second pickle after STOP", append(newPickle().op(opNone).stop(), call("os", "system", "id")...), errs.InvalidArchive, []string{"after STOP"}},
		{"unknown opcode", newPickle().op(0xff).stop(), errs.InvalidArchive, []string{"0xff"}},
		{"protocol 6", []byte{opProto, 6, opNone, opStop}, errs.UnsupportedVersion, []string{"protocol 6"}},
		{"no STOP", newPickle().op(opNone).b, errs.InvalidArchive, []string{"STOP"}},
		{"MARKs nested deeply", deep.stop(), errs.SizeLimitExceeded, []string{"deeper"}},
		{"tuples nested deeply", chain.stop(), errs.SizeLimitExceeded, []string{"deeper"}},
		{"a list that holds itself", cycle, errs.SchemaError, []string{"refers back to itself"}},
		{"persistent id of another kind", newPickle().op(opMark).str("module").str("os").op(opTuple, opBinPersID).stop(), errs.SchemaError, []string{"only storages"}},
		{"REDUCE of a dtype", newPickle().global("torch", "float32").op(opEmptyTuple, opReduce).stop(), errs.SchemaError, []string{"torch.float32 cannot be called"}},
		{"BUILD on a list", newPickle().op(opEmptyList, opEmptyDict, opBuild).stop(), errs.SchemaError, []string{"BUILD on a list"}},
		{"backward hooks", newPickle().global("torch._utils", "_rebuild_tensor_v2").op(opMark).storage("FloatStorage", "0", 4).int(0).
			tuple(4).tuple(1).op(opNewFalse).op(opEmptyDict).str("hook").global("builtins", "print").op(opSetItem, opTuple, opReduce).stop(),
			errs.SchemaError, []string{"builtins.print"}},
		{"quantized tensor", newPickle().global("torch._utils", "_rebuild_qtensor").op(opEmptyTuple, opReduce).stop(), errs.UnsupportedVersion, []string{"_rebuild_qtensor", "quantized"}},
		{"sparse tensor", newPickle().global("torch._utils", "_rebuild_sparse_tensor").op(opEmptyTuple, opReduce).stop(), errs.UnsupportedVersion, []string{"sparse"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(checkpointOf(tc.pkl, map[string][]byte{"0": f32(4)}))
			wantClass(t, err, tc.class, tc.names...)
		})
	}
}

// Tensor rebuilds that lie about their storage are refused.
func TestLyingTensors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pkl   []byte
		class errs.Class
		names []string
	}{
		{"size past the storage", newPickle().dict().str("w").rebuild("FloatStorage", "0", 4, 0, []int64{5}, []int64{1}).end(),
			errs.SchemaError, []string{"lies about its size"}},
		{"offset past the storage", newPickle().dict().str("w").rebuild("FloatStorage", "0", 4, 3, []int64{2}, []int64{1}).end(),
			errs.SchemaError, []string{"lies about its size"}},
		{"stride past the storage", newPickle().dict().str("w").rebuild("FloatStorage", "0", 4, 0, []int64{2, 2}, []int64{3, 1}).end(),
			errs.SchemaError, []string{"lies about its size"}},
		{"numel disagrees with data/0", newPickle().dict().str("w").rebuild("FloatStorage", "0", 5, 0, []int64{4}, []int64{1}).end(),
			errs.SchemaError, []string{"data/0", "16 bytes"}},
		{"dtype disagrees with data/0", newPickle().dict().str("w").rebuild("DoubleStorage", "0", 4, 0, []int64{4}, []int64{1}).end(),
			errs.SchemaError, []string{"data/0"}},
		{"storage the archive lacks", newPickle().dict().str("w").rebuild("FloatStorage", "9", 4, 0, []int64{4}, []int64{1}).end(),
			errs.SchemaError, []string{"data/9"}},
		{"storage key leaving data/", newPickle().dict().str("w").rebuild("FloatStorage", "../data.pkl", 4, 0, []int64{4}, []int64{1}).end(),
			errs.PathTraversal, []string{"../data.pkl"}},
		{"storage declared twice differently", newPickle().dict().str("a").rebuild("FloatStorage", "0", 4, 0, []int64{4}, []int64{1}).
			str("b").rebuild("IntStorage", "0", 4, 0, []int64{4}, []int64{1}).end(), errs.SchemaError, []string{"declared as"}},
		{"negative dimension", newPickle().dict().str("w").rebuild("FloatStorage", "0", 4, 0, []int64{-1}, []int64{1}).end(),
			errs.SchemaError, []string{"size 0"}},
		{"size and stride of different lengths", newPickle().dict().str("w").rebuild("FloatStorage", "0", 4, 0, []int64{4}, []int64{1, 1}).end(),
			errs.SchemaError, []string{"dimensions"}},
		{"zero strides repeating a storage past 1 GiB", newPickle().dict().str("w").rebuild("FloatStorage", "0", 4, 0, []int64{1 << 29}, []int64{0}).end(),
			errs.SizeLimitExceeded, []string{"repeats"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(checkpointOf(tc.pkl, map[string][]byte{"0": f32(4)}))
			wantClass(t, err, tc.class, tc.names...)
		})
	}
}

// Pickles that would create a file when unpickled by Python are refused,
// and the file never appears: nothing is imported or called. The same
// bytes given to Python's own pickle module do create it, which shows the
// test would notice if anything ran.
func TestNothingRuns(t *testing.T) {
	dir := t.TempDir()
	target := func(name string) string { return filepath.Join(dir, name) }
	pickles := map[string][]byte{
		"os.system":        call("os", "system", "touch "+target("os.system")),
		"posix.system":     call("posix", "system", "touch "+target("posix.system")),
		"builtins.open":    call("builtins", "open", target("builtins.open"), "w"),
		"builtins.exec":    call("builtins", "exec", "open("+pyQuote(target("builtins.exec"))+", 'w')"),
		"subprocess.call":  newPickle().global("subprocess", "call").op(opMark, opMark).str("touch").str(target("subprocess.call")).op(opList, opTuple, opReduce).stop(),
		"hidden_in_a_dict": inDict("os", "system", "touch "+target("hidden_in_a_dict")),
		"INST":             append(newPickle().op(opMark).str("touch "+target("INST")).b, []byte("ios\nsystem\n.")...),
	}
	for name, pkl := range pickles {
		if _, err := parse(checkpointOf(pkl, map[string][]byte{"0": f32(4)})); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if _, err := os.Stat(target(name)); err == nil {
			t.Fatalf("%s: parsing created %s", name, target(name))
		}
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		testenv.Missing(t, "python3 is not installed: the control (Python's pickle does run these) is skipped")
	}
	for name, pkl := range pickles {
		cmd := exec.Command(python, "-c", "import pickle, sys; pickle.loads(sys.stdin.buffer.read())")
		cmd.Stdin = bytes.NewReader(pkl)
		cmd.Run() // some raise after their effect; only the file matters
		if _, err := os.Stat(target(name)); err != nil {
			t.Errorf("control: Python's pickle did not create %s from the %s pickle, so this test proves nothing for it", target(name), name)
		}
	}
}

func pyQuote(s string) string { return "'" + s + "'" }

// A pickle whose tuples each hold the previous one twice names 2^n
// tensors from n tuples: the walk stops at MaxTensors.
func TestSharedSubtreeExplosion(t *testing.T) {
	p := newPickle().rebuild("FloatStorage", "0", 4, 0, []int64{4}, []int64{1})
	for range 40 {
		p.op(opBinPut, 0, opBinGet, 0, opTuple2)
	}
	lim := DefaultLimits
	lim.MaxTensors = 1000
	files := map[string][]byte{"m.pt": checkpointOf(p.stop(), map[string][]byte{"0": f32(4)})}
	_, err := CodecWith(lim).Parse(formattest.NewMemDir(files), []string{"m.pt"})
	wantClass(t, err, errs.SizeLimitExceeded, "tensors to name")
}
