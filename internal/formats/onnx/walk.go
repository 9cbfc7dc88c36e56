package onnx

import (
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/mstore/mstore/internal/errs"
	"github.com/mstore/mstore/internal/formats"
)

// Field numbers of onnx.proto that the walker follows.
const (
	modelIRVersion       = 1
	modelProducerName    = 2
	modelProducerVersion = 3
	modelGraph           = 7
	modelOpsetImport     = 8
	modelTrainingInfo    = 20
	modelFunctions       = 25

	opsetDomain  = 1
	opsetVersion = 2

	graphNode              = 1
	graphInitializer       = 5
	graphSparseInitializer = 15

	nodeOutput    = 2
	nodeName      = 3
	nodeOpType    = 4
	nodeAttribute = 5
	nodeDomain    = 7

	attrName          = 1
	attrT             = 5
	attrG             = 6
	attrTensors       = 10
	attrGraphs        = 11
	attrSparseTensor  = 22
	attrSparseTensors = 23

	functionName      = 1
	functionNode      = 7
	functionOpset     = 9
	functionDomain    = 10
	functionAttrProto = 11

	trainingInitialization = 1
	trainingAlgorithm      = 2

	sparseValues  = 1
	sparseIndices = 2

	tensorDims         = 1
	tensorDataType     = 2
	tensorSegment      = 3
	tensorFloatData    = 4
	tensorInt32Data    = 5
	tensorStringData   = 6
	tensorInt64Data    = 7
	tensorName         = 8
	tensorRawData      = 9
	tensorDoubleData   = 10
	tensorUint64Data   = 11
	tensorExternalData = 13
	tensorDataLocation = 14

	entryKey   = 1
	entryValue = 2
)

// node is a message on the way from the ModelProto to a tensor whose bytes
// are a tensor extent. The planner rewrites exactly these messages (their
// lengths change); everything between them is copied.
type node struct {
	tagAt, tagEnd, bodyAt, end int64 // the field that holds the message (zeros and size for the model)
	children                   []*node
	tensor                     *tensorRec
}

// walker walks one .onnx file and finds its tensors.
type walker struct {
	reader
	root         *node
	tensors      []*tensorRec // tensors whose bytes are an extent, in file order
	info         modelInfo
	inTraining   bool     // walking a TrainingInfoProto
	frameTensors []string // tensors whose data stays in the frame
	budget       *formats.Budget
}

// modelInfo is what Meta tells of a .onnx file.
type modelInfo struct {
	irVersion       uint64
	producer        string
	producerVersion string
	opsets          []string // "DOMAIN VERSION", as imported
}

// scope is the graph a tensor belongs to: "" for the main graph, else a
// path such as "If_0.then_branch/Loop_3.body" (see doc.go).
type scope string

func (s scope) child(part string) scope {
	if s == "" {
		return scope(part)
	}
	return s + "/" + scope(part)
}

// walkModel reads the ModelProto that fills the file.
// budget (nil for a planned file) is charged for every tensor it keeps.
func walkModel(src source, path string, budget *formats.Budget) (*walker, error) {
	w := &walker{reader: reader{src: src, path: path}, root: &node{end: src.size()}, budget: budget}
	var hasIR, hasGraph, hasOpset bool
	training := 0
	err := w.fields(0, src.size(), func(f field) error {
		switch f.num {
		case modelIRVersion:
			if err := w.expect(f, protowire.VarintType, "ir_version"); err != nil {
				return err
			}
			if f.v > MaxIRVersion {
				return w.fail(errs.UnsupportedVersion, f.at, "ir_version %d is newer than this build knows (%d)", f.v, MaxIRVersion)
			}
			if f.v == 0 {
				return w.fail(errs.SchemaError, f.at, "ir_version 0")
			}
			hasIR, w.info.irVersion = true, f.v
		case modelProducerName, modelProducerVersion:
			// Only shown: not refused when it is not UTF-8.
			b, err := w.bytes(f, "producer")
			v := strings.ToValidUTF8(string(b), "\uFFFD")
			if f.num == modelProducerName {
				w.info.producer = v
			} else {
				w.info.producerVersion = v
			}
			return err
		case modelOpsetImport:
			hasOpset = true
			domain, version, err := w.opset(f, 2)
			if err == nil {
				if domain == "" {
					domain = "ai.onnx"
				}
				w.info.opsets = append(w.info.opsets, domain+" "+strconv.FormatUint(version, 10))
			}
			return err
		case modelGraph:
			hasGraph = true
			return w.sub(w.root, f, "graph", 2, func(n *node) error { return w.graph(n, "", 2) })
		case modelFunctions:
			return w.sub(w.root, f, "function", 2, func(n *node) error { return w.function(n, 2) })
		case modelTrainingInfo:
			sc := scope("training_info[" + strconv.Itoa(training) + "]")
			training++
			return w.sub(w.root, f, "training_info", 2, func(n *node) error { return w.training(n, sc, 3) })
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	switch {
	case !hasIR:
		return nil, w.fail(errs.SchemaError, 0, "no ir_version: not an ONNX model")
	case !hasGraph:
		return nil, w.fail(errs.SchemaError, 0, "no graph")
	case !hasOpset:
		return nil, w.fail(errs.SchemaError, 0, "no opset_import")
	}
	return w, nil
}

// sub walks the message in field f as a child of parent, at depth, and
// keeps it in the tree when it holds tensors.
func (w *walker) sub(parent *node, f field, what string, depth int, walk func(n *node) error) error {
	if err := w.expect(f, protowire.BytesType, what); err != nil {
		return err
	}
	if depth > MaxDepth {
		return w.fail(errs.SizeLimitExceeded, f.at, "messages nested more than %d deep", MaxDepth)
	}
	n := &node{tagAt: f.at, tagEnd: f.tagEnd, bodyAt: f.val, end: f.end}
	if err := walk(n); err != nil {
		return err
	}
	if len(n.children) > 0 || n.tensor != nil {
		parent.children = append(parent.children, n)
	}
	return nil
}

// opset checks an OperatorSetIdProto against the versions this build knows.
func (w *walker) opset(f field, depth int) (string, uint64, error) {
	if err := w.expect(f, protowire.BytesType, "opset_import"); err != nil {
		return "", 0, err
	}
	if depth > MaxDepth {
		return "", 0, w.fail(errs.SizeLimitExceeded, f.at, "messages nested more than %d deep", MaxDepth)
	}
	domain, version := "", uint64(0)
	err := w.fields(f.val, f.end, func(g field) error {
		var err error
		switch g.num {
		case opsetDomain:
			domain, err = w.str(g, "opset domain")
		case opsetVersion:
			err = w.expect(g, protowire.VarintType, "opset version")
			version = g.v
		}
		return err
	})
	if err != nil {
		return "", 0, err
	}
	if max, known := MaxOpsets[domain]; known && version > max {
		return "", 0, w.fail(errs.UnsupportedVersion, f.at, "opset %d of domain %q is newer than this build knows (%d)", version, domain, max)
	}
	return domain, version, nil
}

func (w *walker) graph(n *node, sc scope, depth int) error {
	return w.fields(n.bodyAt, n.end, func(f field) error {
		switch f.num {
		case graphNode:
			return w.sub(n, f, "node", depth+1, func(c *node) error { return w.node(c, sc, depth+1) })
		case graphInitializer:
			rec, tn, err := w.tensor(f, depth+1)
			if err != nil {
				return err
			}
			if rec.protoName == "" {
				return w.fail(errs.SchemaError, f.at, "initializer without a name")
			}
			// Initializers of training_info graphs are not among those
			// onnx loads external data for: they stay inside.
			rec.local, rec.scope, rec.initializer = rec.protoName, sc, !w.inTraining
			return w.register(n, tn, rec)
		case graphSparseInitializer:
			return w.sparse(n, f, "", sc, depth+1, true)
		}
		return nil
	})
}

// label names a node for the names of its attribute tensors and subgraphs:
// its name, else its first output, else its op_type.
type nodeInfo struct {
	name, opType, domain, output0 string
	attrs                         []field
}

func (i nodeInfo) label() string {
	switch {
	case i.name != "":
		return i.name
	case i.output0 != "":
		return i.output0
	case i.opType != "":
		return i.opType
	}
	return "node"
}

func (w *walker) node(n *node, sc scope, depth int) error {
	var info nodeInfo
	err := w.fields(n.bodyAt, n.end, func(f field) error {
		var err error
		switch f.num {
		case nodeName:
			info.name, err = w.str(f, "node name")
		case nodeOpType:
			info.opType, err = w.str(f, "op_type")
		case nodeDomain:
			info.domain, err = w.str(f, "node domain")
		case nodeOutput:
			if info.output0 == "" {
				info.output0, err = w.str(f, "node output")
			}
		case nodeAttribute:
			err = w.expect(f, protowire.BytesType, "attribute")
			info.attrs = append(info.attrs, f)
		}
		return err
	})
	if err != nil {
		return err
	}
	for _, f := range info.attrs {
		if err := w.sub(n, f, "attribute", depth+1, func(a *node) error { return w.attribute(a, info, sc, depth+1) }); err != nil {
			return err
		}
	}
	return nil
}

// attribute walks the tensors and graphs of an AttributeProto of the node
// described by info.
func (w *walker) attribute(n *node, info nodeInfo, sc scope, depth int) error {
	var name string
	var values []field
	err := w.fields(n.bodyAt, n.end, func(f field) error {
		var err error
		switch f.num {
		case attrName:
			name, err = w.str(f, "attribute name")
		case attrT, attrG, attrTensors, attrGraphs, attrSparseTensor, attrSparseTensors:
			values = append(values, f)
		}
		return err
	})
	if err != nil {
		return err
	}
	base := info.label() + "." + name
	if info.opType == "Constant" && (info.domain == "" || info.domain == "ai.onnx") && name == "value" && info.output0 != "" {
		base = info.output0 // a Constant's value is known by its output's name
	}
	var counts [attrSparseTensors + 1]int // by field number
	for _, f := range values {
		k := counts[f.num]
		counts[f.num]++
		item := func(s string) string {
			if f.num == attrTensors || f.num == attrGraphs || f.num == attrSparseTensors {
				return s + "[" + strconv.Itoa(k) + "]"
			}
			return s
		}
		switch f.num {
		case attrT, attrTensors:
			rec, tn, err := w.tensor(f, depth+1)
			if err != nil {
				return err
			}
			rec.local, rec.scope = item(base), sc
			if err := w.register(n, tn, rec); err != nil {
				return err
			}
		case attrSparseTensor, attrSparseTensors:
			if err := w.sparse(n, f, item(base), sc, depth+1, false); err != nil {
				return err
			}
		case attrG, attrGraphs:
			child := sc.child(item(info.label() + "." + name))
			// A subgraph's scope spells all its parents' names: nested
			// graphs with long node names make it grow with the square
			// of the depth.
			if err := w.budget.Charge(int64(len(child)) + 16); err != nil {
				return err
			}
			if err := w.sub(n, f, "graph", depth+1, func(g *node) error { return w.graph(g, child, depth+1) }); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *walker) function(n *node, depth int) error {
	var name, domain string
	var parts []field // nodes and attribute defaults, in file order
	err := w.fields(n.bodyAt, n.end, func(f field) error {
		var err error
		switch f.num {
		case functionName:
			name, err = w.str(f, "function name")
		case functionDomain:
			domain, err = w.str(f, "function domain")
		case functionOpset:
			_, _, err = w.opset(f, depth+1)
		case functionNode, functionAttrProto:
			parts = append(parts, f)
		}
		return err
	})
	if err != nil {
		return err
	}
	sc := scope("function:" + name)
	if domain != "" {
		sc = scope("function:" + domain + "::" + name)
	}
	info := nodeInfo{name: name}
	for _, f := range parts {
		if f.num == functionNode {
			err = w.sub(n, f, "node", depth+1, func(c *node) error { return w.node(c, sc, depth+1) })
		} else {
			err = w.sub(n, f, "attribute", depth+1, func(a *node) error { return w.attribute(a, info, sc, depth+1) })
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) training(n *node, sc scope, depth int) error {
	w.inTraining = true
	defer func() { w.inTraining = false }()
	return w.fields(n.bodyAt, n.end, func(f field) error {
		switch f.num {
		case trainingInitialization:
			return w.sub(n, f, "graph", depth, func(g *node) error { return w.graph(g, sc.child("initialization"), depth) })
		case trainingAlgorithm:
			return w.sub(n, f, "graph", depth, func(g *node) error { return w.graph(g, sc.child("algorithm"), depth) })
		}
		return nil
	})
}

// sparse walks a SparseTensorProto: its values and indices are two
// tensors, named BASE.values and BASE.indices, where BASE is the values'
// name for a sparse initializer.
func (w *walker) sparse(parent *node, f field, base string, sc scope, depth int, initializer bool) error {
	return w.sub(parent, f, "sparse tensor", depth, func(n *node) error {
		type part struct {
			suffix string
			rec    *tensorRec
			tn     *node
		}
		var parts []part
		err := w.fields(n.bodyAt, n.end, func(g field) error {
			if g.num != sparseValues && g.num != sparseIndices {
				return nil
			}
			rec, tn, err := w.tensor(g, depth+1)
			if err != nil {
				return err
			}
			suffix := ".indices"
			if g.num == sparseValues {
				suffix = ".values"
				if initializer {
					base = rec.protoName
				}
			}
			parts = append(parts, part{suffix, rec, tn})
			return nil
		})
		if err != nil {
			return err
		}
		if initializer && base == "" {
			return w.fail(errs.SchemaError, f.at, "sparse initializer without a name")
		}
		for _, p := range parts {
			// Not marked as initializers: onnx's external data helpers
			// never move sparse tensors out, nor load them back.
			p.rec.local, p.rec.scope = base+p.suffix, sc
			if err := w.register(n, p.tn, p.rec); err != nil {
				return err
			}
		}
		return nil
	})
}

// register files a walked tensor: as an extent-bearing child of parent, or
// as one kept in the frame.
func (w *walker) register(parent, tn *node, rec *tensorRec) error {
	if len(w.tensors)+len(w.frameTensors) >= MaxTensors {
		return w.fail(errs.SizeLimitExceeded, rec.at, "more than %d tensors", MaxTensors)
	}
	// The record, its node and fields, its name (here, in the namer, in
	// the layout and in the manifest) and its layout tensor.
	cost := 4*int64(len(rec.local)+len(rec.protoName)) + int64(len(rec.scope)) + 32*int64(len(rec.fields)) + 8*int64(len(rec.dims)) + 400
	if err := w.budget.Charge(cost); err != nil {
		return err
	}
	if rec.kind == inFrame {
		w.frameTensors = append(w.frameTensors, rec.local)
		return nil
	}
	tn.tensor = rec
	parent.children = append(parent.children, tn)
	w.tensors = append(w.tensors, rec)
	return nil
}
