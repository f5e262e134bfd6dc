package nodeconfig

import (
	"errors"
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
)

// TickFunc is the function the executor puts first in every range body to
// count iterations; a template that names it is refused.
const TickFunc = "weftRangeTick__"

// MaxPrintfWidth caps a printf width or precision in a template.
const MaxPrintfWidth = 1024

// Funcs are the functions a template may call besides text/template's own:
// printf, bounded (BoundedSprintf), and the tick, which does nothing until
// the executor replaces it.
func Funcs() template.FuncMap {
	return template.FuncMap{
		TickFunc: func() (string, error) { return "", nil },
		"printf": BoundedSprintf,
	}
}

// ParseTemplate parses text as a template named name, or says why it is refused.
func ParseTemplate(name, text string) (*template.Template, error) {
	if strings.Contains(text, TickFunc) {
		return nil, fmt.Errorf("%s is reserved", TickFunc)
	}
	t, err := template.New(name).Option("missingkey=error").Funcs(Funcs()).Parse(text)
	if err != nil {
		return nil, err
	}
	if len(t.Templates()) > 1 {
		return nil, errors.New("templates may not define others ({{define}}, {{block}})")
	}
	if t.Tree != nil {
		if err := noCalls(t.Tree.Root); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// noCalls refuses calls of other templates anywhere in n.
func noCalls(n parse.Node) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := noCalls(c); err != nil {
				return err
			}
		}
	case *parse.RangeNode:
		return branches(&n.BranchNode)
	case *parse.IfNode:
		return branches(&n.BranchNode)
	case *parse.WithNode:
		return branches(&n.BranchNode)
	case *parse.TemplateNode:
		return fmt.Errorf("templates may not call others ({{template %q}})", n.Name)
	}
	return nil
}

func branches(b *parse.BranchNode) error {
	if err := noCalls(b.List); err != nil {
		return err
	}
	return noCalls(b.ElseList)
}

// BoundedSprintf is printf without '*' widths and without widths or
// precisions over MaxPrintfWidth, so that a short template cannot build a
// huge string.
func BoundedSprintf(format string, args ...any) (string, error) {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		n := 0
	verb:
		for i++; i < len(format); i++ {
			switch c := format[i]; {
			case c == '*':
				return "", errors.New("printf: '*' widths are not allowed in templates")
			case c >= '0' && c <= '9':
				n = n*10 + int(c-'0')
				if n > MaxPrintfWidth {
					return "", fmt.Errorf("printf: widths and precisions are limited to %d", MaxPrintfWidth)
				}
			case c == '.' || c == '+' || c == '-' || c == '#' || c == ' ' || c == '[' || c == ']':
				n = 0
			default:
				break verb
			}
		}
	}
	return fmt.Sprintf(format, args...), nil
}
