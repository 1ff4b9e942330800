// Does the prompt contain code? A cheap look for the marks code leaves:
// fences, definitions, includes, statements ending in semicolons or braces.
const CODE_MARKS = /```|^\s*(def|class|import|from|function|fn|func|public|private|#include|package|const|let|var)\s+\S|;\s*$|\)\s*\{\s*$|=>\s*\{|^\s*(if|for|while)\s*\(.*\)\s*\{/m;

export function looksLikeCode(text: string): boolean {
  // Code marks show early; scanning a huge prompt whole would cost for nothing.
  return CODE_MARKS.test(text.length > 32_768 ? text.slice(0, 32_768) : text);
}
