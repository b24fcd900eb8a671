package plots

import (
	"bytes"
	"fmt"
	"io"
	"strings"
)

// writeMarkdown writes the report as Markdown, linking to the charts'
// files.
func writeMarkdown(w io.Writer, p page) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n%s\n\n", p.Title, p.Subtitle)
	if len(p.Picks) > 0 {
		b.WriteString("## The verdict\n\n")
		for i, pk := range p.Picks {
			fmt.Fprintf(&b, "%d. **%s**: %s", i+1, pk.Need, mdPick(pk.Limiter))
			if pk.Evidence != "" {
				fmt.Fprintf(&b, " ([the evidence](#%s))", sectionID(pk.Evidence))
			}
			b.WriteString("\n")
		}
		b.WriteString("\nThis run's answers, each read from the numbers of the section it links to; why each, with its numbers, is below. On another machine or with other parameters an answer may change.\n\n")
	} else if !p.Outside {
		b.WriteString("This run measured nothing to choose by.\n\n")
	}
	b.WriteString("Contents:\n\n")
	if len(p.Picks) > 0 {
		b.WriteString("- [Why these picks](#pick)\n")
	}
	for _, s := range p.Sections {
		fmt.Fprintf(&b, "- [%s](#%s)\n", md(s.Heading), s.ID)
	}
	b.WriteString("- [The run](#run)\n\n")
	if len(p.Picks) > 0 {
		b.WriteString("<a id=\"pick\"></a>\n\n## Why these picks\n\n")
		for _, pk := range p.Picks {
			fmt.Fprintf(&b, "- **%s**: %s. %s\n", pk.Need, mdPick(pk.Limiter), md(pk.Why))
		}
		b.WriteString("\n")
	}
	if len(p.Versus) > 0 {
		b.WriteString("### Against the peers\n\n")
		for _, v := range p.Versus {
			fmt.Fprintf(&b, "- %s\n", md(v))
		}
		b.WriteString("\n")
	}
	if len(p.Scorecard.Rows) > 0 {
		if err := p.Scorecard.MarkdownAt(&b, 3); err != nil {
			return err
		}
		b.WriteString("\n")
	}
	for _, s := range p.Sections {
		fmt.Fprintf(&b, "<a id=\"%s\"></a>\n\n## %s\n\n", s.ID, md(s.Heading))
		if s.About != "" {
			fmt.Fprintf(&b, "What it measures: %s.\n\n", md(s.About))
		}
		for _, c := range s.Charts {
			fmt.Fprintf(&b, "### %s\n\n![%s](%s)\n\n%s ([SVG](%s))\n\n", md(c.Title), md(c.Title), c.PNGPath, md(c.Caption), c.SVGPath)
		}
		for _, t := range s.Tables {
			if err := t.MarkdownAt(&b, 3); err != nil {
				return err
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("<a id=\"run\"></a>\n\n")
	b.WriteString("## The run\n\n")
	for _, m := range p.Meta {
		fmt.Fprintf(&b, "- %s: %s\n", m[0], md(m[1]))
	}
	b.WriteString("\n")
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "%s\n\n", md(n))
	}
	if p.Source != "" {
		fmt.Fprintf(&b, "To draw this report again from the run's results, without running it: `ratelab report %s`.\n", p.Source)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// mdPick is a pick's limiters as Markdown code, "none" for none.
func mdPick(limiter string) string {
	if limiter == "" {
		return "none"
	}
	return "`" + strings.ReplaceAll(limiter, ", ", "`, `") + "`"
}

// md makes text safe in Markdown, where a "<" can open an HTML tag that
// swallows what follows.
var md = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace
