package figure

import (
	"strings"

	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgpdf"
)

// pdfCanvas is gonum/plot's PDF canvas with its text written in the encoding the PDF declares for its fonts
// (WinAnsi, Windows-1252): vgpdf hands the UTF-8 bytes over as they are, so "→" would print as "â†’".
type pdfCanvas struct{ *vgpdf.Canvas }

func (c pdfCanvas) FillString(f font.Face, pt vg.Point, s string) {
	c.Canvas.FillString(f, pt, winAnsi(s))
}

// winANSISpecial are the characters Windows-1252 has at 0x80–0x9f (elsewhere it is Latin-1).
var winANSISpecial = map[rune]byte{'€': 0x80, '‚': 0x82, 'ƒ': 0x83, '„': 0x84, '…': 0x85, '†': 0x86, '‡': 0x87,
	'ˆ': 0x88, '‰': 0x89, 'Š': 0x8a, '‹': 0x8b, 'Œ': 0x8c, 'Ž': 0x8e, '‘': 0x91, '’': 0x92, '“': 0x93, '”': 0x94,
	'•': 0x95, '–': 0x96, '—': 0x97, '˜': 0x98, '™': 0x99, 'š': 0x9a, '›': 0x9b, 'œ': 0x9c, 'ž': 0x9e, 'Ÿ': 0x9f}

// winANSIFallback spells the characters Windows-1252 lacks that the figures use.
var winANSIFallback = map[rune]string{'→': "->", '←': "<-", '≥': ">=", '≤': "<=", '≈': "~", '−': "-", '✓': "v"}

// winAnsi is s in Windows-1252 bytes; a character it lacks is spelled out, or "?".
func winAnsi(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x80 || r >= 0xa0 && r <= 0xff:
			b.WriteByte(byte(r))
		case winANSISpecial[r] != 0:
			b.WriteByte(winANSISpecial[r])
		case winANSIFallback[r] != "":
			b.WriteString(winANSIFallback[r])
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}
